# nats-server, built from the module gitfleet already requires
# (go build github.com/nats-io/nats-server/v2), static, FROM scratch.
FROM scratch
COPY nats-server /nats-server
USER 65532:65532
ENTRYPOINT ["/nats-server"]
