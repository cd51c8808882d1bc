from extrapolate.cli import main

main()
