from extrapolate.cli.app import main

main()
