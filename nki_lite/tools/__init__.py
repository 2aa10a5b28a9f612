"""The command line's engines, one module per job (nki_lite/cli.py only parses and dispatches):
`kernelfile` (FILE::KERNEL references), `runner` (run / estimate with random inputs), `checkdir`
(every kernel file with a numpy check in a directory), `bench` (the stdlib table), `sysinfo`,
`progress` (a progress bar: tqdm when installed, else a plain one)."""
