from sgcli.cli.launch import main

main()
