"""Foundation every layer may use, and which imports no other layer: configs and their hashes (the identity of
every model and run) with the rules of what enters them (identity.py), errors, devices and dtypes, paths
(caches, output folders, packaged data), atomic writes, locks, file readers, numeric inputs and their ranges,
the registry of names, and the process world under torchrun. A new helper goes here only if a kernel, an
encoding or the data layer needs it too."""
