from jobrelay.cli.main import main

main()
