#!/usr/bin/python3
"""A TLS-terminating TCP proxy for tests, on 127.0.0.1 only.

Usage: tls_proxy.py --target HOST:PORT --port-file FILE [--counts FILE] NAME=CERT,KEY ...
Each NAME gets a listener on a free loopback port presenting CERT (PEM chain)
and KEY; a connection whose handshake succeeds is piped to the target, both
ways. The ports go to --port-file as JSON {NAME: port}; --counts is rewritten
after every connection with {NAME: {"accepted": n, "handshakes_failed": n}},
so a test can tell how often a client tried. Ends on SIGTERM or SIGINT; a
test that started it stops it.
"""
import argparse
import json
import os
import signal
import socket
import ssl
import threading

HANDSHAKE_TIMEOUT_S = 10


def pipe(source, destination):
    try:
        while data := source.recv(65536):
            destination.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, destination):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--counts")
    parser.add_argument("listeners", nargs="+", metavar="NAME=CERT,KEY")
    args = parser.parse_args()
    target_host, target_port = args.target.rsplit(":", 1)
    counts, lock = {}, threading.Lock()

    def count(name, what):
        with lock:
            counts[name][what] += 1
            if args.counts:
                with open(args.counts + ".tmp", "w") as f:
                    json.dump(counts, f)
                os.replace(args.counts + ".tmp", args.counts)

    def serve_one(name, context, connection):
        count(name, "accepted")
        connection.settimeout(HANDSHAKE_TIMEOUT_S)
        try:
            secure = context.wrap_socket(connection, server_side=True)
        except (ssl.SSLError, OSError):
            count(name, "handshakes_failed")
            connection.close()
            return
        secure.settimeout(None)
        try:
            upstream = socket.create_connection((target_host, int(target_port)), timeout=5)
            upstream.settimeout(None)
        except OSError:
            secure.close()
            return
        threading.Thread(target=pipe, args=(upstream, secure), daemon=True).start()
        pipe(secure, upstream)

    def accept_loop(name, context, listener):
        while True:
            connection, _ = listener.accept()
            threading.Thread(target=serve_one, args=(name, context, connection), daemon=True).start()

    ports = {}
    for spec in args.listeners:
        name, files = spec.split("=", 1)
        certificate, key = files.split(",", 1)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certificate, key)
        counts[name] = {"accepted": 0, "handshakes_failed": 0}
        listener = socket.create_server(("127.0.0.1", 0))
        ports[name] = listener.getsockname()[1]
        threading.Thread(target=accept_loop, args=(name, context, listener), daemon=True).start()
    if args.counts:
        with open(args.counts, "w") as f:
            json.dump(counts, f)
    with open(args.port_file + ".tmp", "w") as f:
        json.dump(ports, f)
    os.replace(args.port_file + ".tmp", args.port_file)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    while not stop.wait(1):
        pass


if __name__ == "__main__":
    main()
