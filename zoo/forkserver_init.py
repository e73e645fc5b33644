"""Imported last by the harness's forkserver (and nowhere else): freezes the objects of the
preloaded process for the garbage collector. Forked cells share them copy-on-write; a
cell's collections would otherwise touch, and so copy, every one of them, which made a
cell's compile ~0.9 s slower than the same compile in a fresh interpreter (the gc module's
documented advice for fork without exec). Unfrozen again at exit so the forkserver's own
shutdown can free them. Before that it runs the process's one capture warm-up
(``zoo.cell.process_warmup``), so forked cells inherit a warm torch.export."""

import atexit
import gc

from zoo.cell import process_warmup

process_warmup()
gc.freeze()
atexit.register(gc.unfreeze)
