from lab.cli import main

main()
