"""A loopback HTTP server for the runtimes corpus's curl case: answers POST with the body's
SHA-256 and GET with a fixed page; prints its port once listening, serves until killed."""
import hashlib
import http.server
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.reply(200, hashlib.sha256(body).hexdigest().encode() + b"\n")

    def do_GET(self):
        self.reply(404 if self.path == "/missing" else 200, b"page " + self.path.encode() + b"\n")

    def reply(self, code, data):
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
sys.stdout.close()
server.serve_forever()
