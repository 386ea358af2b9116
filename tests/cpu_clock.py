"""The clock of the tests that bound how long a refusal or a pass over the input takes.

Wall time on a loaded 2-core CI machine stretches with every other process: a check that takes 0.5 s alone
can take ten times that when the machine is shared, and a bound on it then fails for no fault of the code.
The CPU time the work spends barely moves with the load, and it is what a quadratic loop, an endless read of
/dev/zero or a list of a billion ranks grows. A wait that costs no CPU (a blocked open) is caught by the
tests' own timeouts and alarms, not by these bounds."""
from __future__ import annotations

import os


def cpu_seconds() -> float:
    """CPU seconds (user and system) of this process, its threads and the children it has waited for
    (`subprocess.run`'s), so a bound holds whether the work runs here or in a child."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system
