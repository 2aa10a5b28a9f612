"""The calling convention between generated kernels and the runtime: the status words.

`i32 @nkl_kernel(ptr args, ptr arena, ptr status, ptr print_cb)` returns 0 (done), 1 (error: details
in status) or 2 (stopped by the stop flag). The runtime writes the inputs before each call.
"""
STATUS_WORDS = 40
STATUS_LOOPS = 6        # out, on error: status[0:6] = code, site, operand, dim, lo, hi; then loop values
STATUS_LOOP_WORDS = 24  # status[6:30] holds the values of pids and enclosing loop vars
STATUS_PHASES = 35      # in: bit 1 prologue, bit 2 programs [lo, hi), bit 4 epilogue (lower/parallel.py)
STATUS_PRIVATE_ARENA = 36   # in: address of this thread's arena for private buffers (0: the arena argument)
STATUS_STOP = 37        # in: address of a shared int64 "stop" flag (0: none); when set -> return 2
STATUS_PROG_LO = 38     # in: the range [lo, hi) of linear SPMD program ids to run
STATUS_PROG_HI = 39
