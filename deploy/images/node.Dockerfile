# A docker provider machine (gitfleet-node): `gitfleet node` from the
# static binary, as the machine's root like a VM's init. Nothing is
# pulled: FROM scratch.
FROM scratch
COPY gitfleet /gitfleet
ENTRYPOINT ["/gitfleet"]
