"""The self-tests' environment, inherited by every run of the suite they start.

KSC_KIND_AUTO=off: on a machine whose Docker cannot run swap-enabled kind nodes, a self-test run
that reached the kind preflight would otherwise install kind with Go and boot the kind host VM
(clusters/kind_autohost.py). The tests of that decision turn it back on, with stand-ins for
both."""

from __future__ import annotations

import os

os.environ["KSC_KIND_AUTO"] = "off"
