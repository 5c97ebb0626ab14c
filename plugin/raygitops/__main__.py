from raygitops.cli.main import main

main()
