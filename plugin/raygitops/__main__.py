from raygitops.cli.main import main

main(prog_name="raygitops")  # the name completion and help use, also under `python -m raygitops`
