"""The bottom layer: identifiers, the error hierarchy, invariants, clock and rng protocols.

Nothing here imports any other part of Odradek.
"""
