"""The controller layer: metadata commands become records, and records become the image.

``odradek.controller.image`` owns the metadata image, the state every node derives by
replaying the ``__cluster_metadata`` log. The layer is pure: it imports only ``core``
and ``protocol``, and never does I/O.
"""
