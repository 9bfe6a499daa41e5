"""Helpers shared by the test files (imported as ``tests.support.<module>``; fixtures and hooks stay in conftest.py).

* :mod:`.bristol` -- where the standard Bristol Fashion files are, and their names for parametrizing;
* :mod:`.noise_power` -- exact pmfs and the power-checked goodness-of-fit tests of the noise-power tests;
* :mod:`.chisquare` -- chi-square of integer samples against an exact pmf (the gadget tests);
* :mod:`.garble`, :mod:`.twopc` -- random circuits and bits, two Yao parties in one process;
* :mod:`.processes` -- child scripts for the two-process channel and OT tests;
* :mod:`.ustat`, :mod:`.audit`, :mod:`.cli` -- the ustat test data, the neighbouring-datasets comparison,
  the in-process command line's usage errors.
"""
