"""A generated project's conftest.py with an API server failing the suite as it does on a real
node: ``lost()``, a real refused connection through urllib3; ``refused()``, a request of the
kubernetes client to a loopback server that answers it as an API server refusing the suite's
credentials (403), so a report shows the real client's exception; ``refused_discovery()``, the
suite's own discovery of a node's kubelet config (clusters/discovery.py) refused so, as the node
fixture meets it (the project needs the checkout on its PYTHONPATH)."""

CONFTEST = '''
import http.server
import json
import threading

from kubernetes import client


class _Refusing(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden",
                           "code": 403, "message": 'nodes is forbidden: User "kubernetes-admin" cannot list'
                                                   ' resource "nodes" in API group "" at the cluster scope'}).encode()
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def lost():
    import urllib3

    urllib3.PoolManager(retries=urllib3.Retry(0)).request("GET", "http://127.0.0.1:9/api/v1/nodes")


def _against_a_refusing_server(use):
    server = http.server.HTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.handle_request, daemon=True).start()
    try:
        config = client.Configuration()
        config.host = f"http://127.0.0.1:{server.server_port}"
        use(client.ApiClient(config))
    finally:
        server.server_close()


def refused():
    _against_a_refusing_server(lambda api: client.CoreV1Api(api).list_node())


def refused_discovery():
    from clusters import discovery

    _against_a_refusing_server(lambda api: discovery.kubelet_config(api, "ksc-node", seconds=30))
'''
