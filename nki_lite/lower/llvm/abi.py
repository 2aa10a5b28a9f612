"""The calling convention between generated kernels and the runtime: the status words.

`i32 @nkl_kernel(ptr args, ptr arena, ptr status, ptr print_cb)` returns 0 (done), 1 (error: details
in status) or 2 (stopped by the stop flag). The runtime writes the inputs before each call.

Parallel regions (lower/parallel.py `regions`): at region k the kernel writes its `args` and `arena`
and the enclosing loop values into its status words and calls the dispatcher (STATUS_DISPATCH) with
(k, status); the runtime runs `i32 @nkl_region_<k>(ptr args, ptr shared_arena, ptr status, ptr 0)`
on threads, each for iterations [STATUS_PROG_LO, STATUS_PROG_HI) with its own private arena, and
returns 0, 1 (the failing thread's error copied into the caller's status) or 2 (stopped).
"""
STATUS_WORDS = 48
STATUS_LOOPS = 6        # out, on error: status[0:6] = code, site, operand, dim, lo, hi; then loop values
STATUS_LOOP_WORDS = 24  # status[6:30] holds the values of pids and enclosing loop vars
STATUS_REGION_ARGS = 32    # out, for a region dispatch: the kernel's args pointer
STATUS_REGION_ARENA = 33   # out, for a region dispatch: the arena holding the shared buffers
STATUS_DISPATCH = 34    # in: address of the runtime's region dispatcher `i32 (i64 region, ptr status)` (0: run inline)
STATUS_PHASES = 35      # in: bit 1 prologue, bit 2 programs [lo, hi), bit 4 epilogue (lower/parallel.py)
STATUS_PRIVATE_ARENA = 36   # in: address of this thread's arena for private buffers (0: the arena argument)
STATUS_STOP = 37        # in: address of a shared int64 "stop" flag (0: none); when set -> return 2
STATUS_PROG_LO = 38     # in: the range [lo, hi) of linear SPMD program ids to run
STATUS_PROG_HI = 39
STATUS_REGION_ENV = 40  # out, for a region dispatch: values of the loop variables enclosing the region (8 words)
