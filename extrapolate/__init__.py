"""extrapolate: how far past its training length does a positional encoding hold up?"""

__version__ = "0.1.0"
