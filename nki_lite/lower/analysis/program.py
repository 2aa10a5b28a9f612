"""Program structure of a traced kernel: every instruction as a `Site` in program order.

Contract: `Program.build(kernel)` numbers the instructions of the kernel body in program order
(`Site.pos`), each with its enclosing loops (outermost first); `loop_span[id(loop)]` is the
(first, last) position of the loop's body (an empty body spans its own start position);
`loop_name[var]` is (the name the user gave the loop variable, start, step, the loop). The
verifier's rules, the capacity footprints and the coverage/dependence analyses all read one
`Program` per kernel (lower/analysis/__init__.py caches it). Nothing raises.
"""
from __future__ import annotations

import linecache
import re
from dataclasses import dataclass

from ...core.ir import Instr, Kernel, Loop


@dataclass(slots=True)
class Site:                 # slots: a kernel of 10^5 instructions keeps 10^5 sites with its analysis
    instr: Instr
    loops: tuple[Loop, ...]
    pos: int

    @property
    def loc(self):
        return self.instr.loc

    @property
    def executes(self) -> bool:
        return all(l.trip > 0 for l in self.loops)


@dataclass
class Program:
    sites: list[Site]
    loop_span: dict[int, tuple[int, int]]            # id(loop) -> (first pos, last pos)
    loop_name: dict[str, tuple[str, int, int, Loop]]  # var -> (user name, start, step, loop)

    @staticmethod
    def build(kernel: Kernel) -> "Program":
        sites: list[Site] = []
        span: dict[int, tuple[int, int]] = {}
        names: dict[str, tuple[str, int, int, Loop]] = {}

        def walk(nodes, loops):
            for n in nodes:
                if isinstance(n, Loop):
                    first = len(sites)
                    names[n.var] = (loop_user_name(n), n.start, n.step, n)
                    walk(n.body, loops + (n,))
                    span[id(n)] = (first, max(first, len(sites) - 1))
                else:
                    sites.append(Site(n, loops, len(sites)))
        walk(kernel.body, ())
        return Program(sites, span, names)


def loop_user_name(loop: Loop) -> str:
    """The name the user gave the loop variable (`for NAME in nl.affine_range(...)`), else the IR var."""
    if loop.loc is not None and loop.loc.line > 0:
        src = linecache.getline(loop.loc.file, loop.loc.line)
        m = re.search(r"\bfor\s+([A-Za-z_][A-Za-z0-9_]*)\s+in\b", src)
        if m:
            return m.group(1)
    return loop.var
