from sgcli.cli.app import main

main()
