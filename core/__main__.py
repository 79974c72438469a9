from cmpx.cli.launch import main

main()
