"""Where the CPU time of ``indexzoo list`` goes (user + system, getrusage): the command line's
imports (NumPy, pydantic, the core), the plugins' imports (the entry points), their register
hooks (each class checked against the contract), and the listing itself."""

import io
import resource


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


t0 = cpu()
import indexzoo.tools.cli as cli  # noqa: E402

t1 = cpu()
import indexzoo.registry as r  # noqa: E402

r.plugin_manager()
t2 = cpu()
r.available()
t3 = cpu()
cli.main(["list"], out=io.StringIO())
t4 = cpu()
print(f"startup {t0:.3f} cli-import {t1 - t0:.3f} plugins {t2 - t1:.3f} hooks {t3 - t2:.3f} "
      f"rest {t4 - t3:.3f} total {t4:.3f}")
