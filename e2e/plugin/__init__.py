"""The suite's pytest plugin, one job per module (laid out as pytest-xdist and pytest-testinfra
lay out theirs):

* ``options``  the command line, and every check its values allow before anything costly starts
* ``run``      the run's life: its directory (handed to xdist workers), its provider, preflight once
               in the process that owns the run, signals, and the one way it ends: teardown of what
               it created, whatever raised before
* ``nodes``    what tests ask for: ``swap_node`` and the named nodes, their order, ``runs_alone``
* ``workers``  under xdist, which worker runs which test (one behavior's node each)
* ``summary``  what the run proved: results, the gate's verdict, the results directory, the
               terminal sections
* ``hooks``    the plugin's own hook, ``pytest_ksc_make_provider`` (a plugin may offer the provider)
* ``state``    the run as the others read it (``the_run``, ``is_worker``): no hooks, and it imports
               none of the modules above that read it, so their imports point one way

The repository's ``conftest.py`` registers it.
"""

pytest_plugins = ["e2e.plugin.options", "e2e.plugin.run", "e2e.plugin.nodes", "e2e.plugin.workers",
                  "e2e.plugin.summary"]
