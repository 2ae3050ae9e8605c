from imposer.cli import main

main()
