"""Load generators: closed loop (clients x threads), and later open loop, commands, distributed."""
