//! The HTTP/1.1 listener of `--metrics-bind-address`: three GET paths
//! need no web framework.

use super::Metrics;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Serves the three paths until the process ends. `/readyz` is ready while
/// standing by for the lock and, once leading, after the first full round.
pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> anyhow::Result<()> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("--metrics-bind-address {addr}: {e}"))?;
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                continue;
            };
            let metrics = metrics.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut read = 0;
                // Up to the end of the request head (bounded, with a timeout).
                let head = tokio::time::timeout(Duration::from_secs(5), async {
                    while read < buf.len() {
                        let n = socket.read(&mut buf[read..]).await.ok()?;
                        if n == 0 {
                            break;
                        }
                        read += n;
                        if buf[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                            break;
                        }
                    }
                    Some(())
                })
                .await;
                if !matches!(head, Ok(Some(()))) {
                    return;
                }
                let request = String::from_utf8_lossy(&buf[..read]);
                let response = respond(&metrics, &request, Instant::now());
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    Ok(())
}

/// The response to a request's head: its path routed, the query left
/// aside; what it says is read from `metrics` at `now`.
fn respond(metrics: &Metrics, request: &str, now: Instant) -> String {
    let path = request
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .split('?')
        .next()
        .unwrap_or("");
    let unavailable = "503 Service Unavailable";
    let (status, content_type, body) = match path {
        "/healthz" => match metrics.liveness(now) {
            Ok(()) => ("200 OK", "text/plain", "ok\n".to_string()),
            Err(why) => (unavailable, "text/plain", format!("{why}\n")),
        },
        "/readyz" => match metrics.readiness(now) {
            Ok(()) => ("200 OK", "text/plain", "ok\n".to_string()),
            Err(why) => (unavailable, "text/plain", why.join("\n") + "\n"),
        },
        "/metrics" => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            metrics.render(),
        ),
        _ => ("404 Not Found", "text/plain", "not found\n".to_string()),
    };
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// One GET on a fresh connection: status line, content type, body.
    async fn get(addr: SocketAddr, path: &str) -> (String, String, String) {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).await.unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        let status = head.lines().next().unwrap().to_string();
        let content_type = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-type: ")
                    .map(str::to_string)
            })
            .unwrap_or_default();
        (status, content_type, body.to_string())
    }

    #[tokio::test]
    async fn the_listener_serves_the_three_paths_and_404_elsewhere() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let m = Arc::new(Metrics::default());
        m.rounds.store(3, Ordering::Relaxed);
        serve(addr, m.clone()).await.unwrap();
        let (status, ct, body) = get(addr, "/metrics").await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert_eq!(ct, "text/plain; version=0.0.4; charset=utf-8");
        assert!(
            body.contains("kubefedctl_reconcile_rounds_total 3\n"),
            "{body}"
        );
        assert_eq!(get(addr, "/healthz").await.0, "HTTP/1.1 200 OK");
        assert_eq!(get(addr, "/readyz?verbose").await.2, "ok\n");
        m.leader.store(true, Ordering::Relaxed);
        let (status, _, body) = get(addr, "/readyz").await;
        assert_eq!(
            (status.as_str(), body.as_str()),
            ("HTTP/1.1 503 Service Unavailable", "not synced yet\n")
        );
        assert_eq!(get(addr, "/nope").await.0, "HTTP/1.1 404 Not Found");
    }

    /// Routing needs no socket: a wedged loop fails `/healthz` (so that a
    /// kubelet restarts it), a query is left aside, the length is the body's.
    #[test]
    fn a_request_head_is_routed_without_a_socket() {
        let m = Metrics::default();
        m.beat();
        let wedged = Instant::now() + super::super::WEDGED_AFTER + Duration::from_secs(1);
        let healthz = respond(&m, "GET /healthz HTTP/1.1\r\n\r\n", wedged);
        assert!(
            healthz.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{healthz}"
        );
        let ok = respond(&m, "GET /readyz?verbose HTTP/1.1\r\n\r\n", Instant::now());
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains("\r\nContent-Length: 3\r\n") && ok.ends_with("\r\n\r\nok\n"));
        let none = respond(&m, "", Instant::now());
        assert!(none.starts_with("HTTP/1.1 404 Not Found\r\n"), "{none}");
    }
}
