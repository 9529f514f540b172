from gate.cli import console

console()
