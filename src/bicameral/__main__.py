from bicameral.cli import main

main()
