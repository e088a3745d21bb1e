//! A tiny blocking HTTPS client for the environment's own checks (readiness,
//! setup) and for tests that need one raw request. One connection per request.

use anyhow::{Context, Result, anyhow, bail};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

/// An answer: status code and body text.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub body: String,
}

impl Response {
    pub fn json(&self) -> Result<serde_json::Value> {
        serde_json::from_str(&self.body).with_context(|| format!("not JSON: {}", self.body))
    }
}

/// Sends `method url` with an optional bearer token and JSON (or YAML)
/// body, trusting `ca_pem`.
pub fn request(
    method: &str,
    url: &str,
    ca_pem: &str,
    token: Option<&str>,
    body: Option<&str>,
    timeout: Duration,
) -> Result<Response> {
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| anyhow!("only https URLs are supported: {url}"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
    let tls = client_config(ca_pem)?;
    let server_name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| anyhow!("bad host {host}: {e}"))?;
    let conn = rustls::ClientConnection::new(tls, server_name)?;
    let addr = authority
        .parse()
        .with_context(|| format!("{authority} is not an ip:port"))?;
    let sock = TcpStream::connect_timeout(&addr, timeout)?;
    sock.set_read_timeout(Some(timeout))?;
    sock.set_write_timeout(Some(timeout))?;
    let mut stream = rustls::StreamOwned::new(conn, sock);

    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json\r\nConnection: close\r\n"
    );
    if let Some(t) = token {
        head.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    let body = body.unwrap_or("");
    if !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH") {
        let json = body.is_empty() || body.trim_start().starts_with(['{', '[']);
        let ctype = match (method, json) {
            ("PATCH", _) => "application/merge-patch+json",
            (_, true) => "application/json",
            // The API server reads a YAML document as kubectl sends it.
            (_, false) => "application/yaml",
        };
        head.push_str(&format!(
            "Content-Type: {ctype}\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()?;

    let mut raw = Vec::new();
    match stream.read_to_end(&mut raw) {
        Ok(_) => {}
        // Servers that close without close_notify still sent a full answer.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
        Err(e) => return Err(e.into()),
    }
    parse_response(&raw)
}

/// A plain-HTTP POST of a JSON body to `addr` (`127.0.0.1:2379`): etcd's
/// JSON gateway, which the environment's etcd serves without TLS.
pub fn plain_post(addr: &str, path: &str, body: &str, timeout: Duration) -> Result<Response> {
    plain("POST", addr, path, body, timeout)
}

/// A plain-HTTP GET of `path` at `addr` (`127.0.0.1:8080`): a process's
/// own `/metrics` or `/readyz`.
pub fn plain_get(addr: &str, path: &str, timeout: Duration) -> Result<Response> {
    plain("GET", addr, path, "", timeout)
}

fn plain(method: &str, addr: &str, path: &str, body: &str, timeout: Duration) -> Result<Response> {
    let sock_addr = addr
        .parse()
        .with_context(|| format!("{addr} is not an ip:port"))?;
    let mut sock = TcpStream::connect_timeout(&sock_addr, timeout)?;
    sock.set_read_timeout(Some(timeout))?;
    sock.set_write_timeout(Some(timeout))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if method == "POST" {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    sock.write_all(head.as_bytes())?;
    sock.write_all(body.as_bytes())?;
    let mut raw = Vec::new();
    sock.read_to_end(&mut raw)?;
    parse_response(&raw)
}

fn client_config(ca_pem: &str) -> Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
        roots.add(cert?)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(cfg))
}

fn parse_response(raw: &[u8]) -> Result<Response> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| anyhow!("truncated HTTP answer ({} bytes)", raw.len()))?;
    let head = std::str::from_utf8(&raw[..split])?;
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("bad status line"))?;
    let chunked = lines.any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let mut body = raw[split + 4..].to_vec();
    if chunked {
        body = dechunk(&body)?;
    }
    Ok(Response {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| anyhow!("bad chunk"))?;
        let size_text = std::str::from_utf8(&data[..eol])?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)?;
        data = &data[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if data.len() < size + 2 {
            bail!("truncated chunk");
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_chunked_answers() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        let r = parse_response(plain).unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "ok"));
        let chunked =
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        let r = parse_response(chunked).unwrap();
        assert_eq!((r.status, r.body.as_str()), (404, "abcde"));
        assert!(parse_response(b"HTTP/1.1 200").is_err());
    }

    #[test]
    fn a_plain_get_sends_its_path_and_reads_the_answer() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                s.read_exact(&mut byte).unwrap();
                head.push(byte[0]);
            }
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nup 1")
                .unwrap();
            String::from_utf8(head).unwrap()
        });
        let r = plain_get(&addr, "/metrics", Duration::from_secs(5)).unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "up 1"));
        let head = server.join().unwrap();
        assert!(head.starts_with("GET /metrics HTTP/1.1\r\n"), "{head}");
        assert!(!head.contains("Content-Length"), "{head}");
    }
}
