from imposer.cli import main

main(prog_name="imposer")
