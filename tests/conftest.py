"""The self-tests' environment, inherited by every run of the suite they start.

KSC_KIND_AUTO=off: on a machine whose Docker cannot run swap-enabled kind nodes, a self-test run
that reached the kind preflight would otherwise install kind with Go and boot the kind host VM
(clusters/kind_autohost.py). The tests of that decision turn it back on, with stand-ins for
both.

KSC_VM_ALONE=off: the self-tests' stand-in guests (tests/fake_qemu.py) run beside each other, and
beside a real guest of the suite running on this host meanwhile; the tests of that refusal turn
it back on."""

from __future__ import annotations

import os

os.environ["KSC_KIND_AUTO"] = "off"
os.environ["KSC_VM_ALONE"] = "off"
