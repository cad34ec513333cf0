# gitfleet's image: the static binary alone (make images builds it with
# CGO_ENABLED=0 into bin/images/). Nothing is pulled: FROM scratch.
FROM scratch
COPY gitfleet /gitfleet
USER 65532:65532
ENTRYPOINT ["/gitfleet"]
