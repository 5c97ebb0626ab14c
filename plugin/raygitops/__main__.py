from raygitops.cli import main

main()
