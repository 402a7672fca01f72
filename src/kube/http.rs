//! The HTTP server of `sliced run`: `/metrics` for Prometheus, `/healthz` for the liveness probe,
//! `/readyz` for the readiness probe, and read-only `/debug/...` answers (the DNS view). HTTP/1.1 only, one task per connection; on shutdown it
//! stops accepting, lets requests in flight finish, and closes idle connections.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http::header::{ALLOW, CONTENT_TYPE, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::metrics::{self, Metrics};

/// A client that sends no complete request head within this is dropped.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long shutdown waits for requests in flight.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// The pause after a failed accept (out of file descriptors, say), so that it does not spin;
/// doubled after each failure in a row, up to `ACCEPT_BACKOFF_MAX`.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(5);

const TEXT: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json";

/// Answers a `/debug/...` path with its query string: a status and a JSON body, or `None` for a
/// path it does not know.
pub type DebugHandler = Box<dyn Fn(&str, &str) -> Option<(StatusCode, String)> + Send + Sync>;

/// What the handlers read: the metrics, and the health the adapter reports.
pub struct HttpState {
    metrics: Arc<Metrics>,
    /// Called before each scrape, to copy the engine's gauges (`Metrics::refresh`).
    refresh: Box<dyn Fn() + Send + Sync>,
    engine_alive: AtomicBool,
    caches_synced: AtomicBool,
    debug: Option<DebugHandler>,
}

impl std::fmt::Debug for HttpState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpState")
            .field("engine_alive", &self.is_alive())
            .field("caches_synced", &self.is_ready())
            .finish_non_exhaustive()
    }
}

impl HttpState {
    /// `refresh` runs before every scrape; typically `move || metrics.refresh(&engine)`. The
    /// engine counts as alive and the caches as not yet synced.
    pub fn new(metrics: Arc<Metrics>, refresh: impl Fn() + Send + Sync + 'static) -> Self {
        HttpState {
            metrics,
            refresh: Box::new(refresh),
            engine_alive: AtomicBool::new(true),
            caches_synced: AtomicBool::new(false),
            debug: None,
        }
    }

    /// Serves `/debug/...` with `handler`.
    pub fn with_debug(mut self, handler: DebugHandler) -> Self {
        self.debug = Some(handler);
        self
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The engine's thread stopped (or runs again): `/healthz` fails while it is down.
    pub fn set_engine_alive(&self, alive: bool) {
        self.engine_alive.store(alive, Ordering::Release);
    }

    /// The watch caches are synced: `/readyz` succeeds from now on.
    pub fn set_ready(&self, synced: bool) {
        self.caches_synced.store(synced, Ordering::Release);
    }

    pub fn is_alive(&self) -> bool {
        self.engine_alive.load(Ordering::Acquire)
    }

    pub fn is_ready(&self) -> bool {
        self.is_alive() && self.caches_synced.load(Ordering::Acquire)
    }
}

/// Serves `listener` until `shutdown` completes, then drains the connections. Accept errors are
/// logged and retried: a full file table should not end the probes for good.
pub async fn serve(
    listener: TcpListener,
    state: Arc<HttpState>,
    shutdown: impl Future<Output = ()> + Send,
) -> io::Result<()> {
    let (stop, stopped) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut backoff = ACCEPT_BACKOFF;
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    backoff = ACCEPT_BACKOFF;
                    connections.spawn(connection(stream, Arc::clone(&state), stopped.clone()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, retry_in = ?backoff, "metrics server: accept failed");
                    tokio::time::sleep(backoff).await;
                    backoff = backoff.saturating_mul(2).min(ACCEPT_BACKOFF_MAX);
                }
            },
            // Reaps finished connections, so the set holds only live ones.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let _ = stop.send(true);
    let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!("metrics server: connections still open after shutdown; dropped");
    }
    // Dropping the set aborts whatever is left.
    Ok(())
}

/// One connection, until the client closes it or shutdown asks it to finish.
async fn connection(
    stream: tokio::net::TcpStream,
    state: Arc<HttpState>,
    mut stop: watch::Receiver<bool>,
) {
    let service = service_fn(move |req: Request<Incoming>| {
        let response = respond(&state, &req);
        async move { Ok::<_, Infallible>(response) }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    let mut conn = std::pin::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        // The only change is to stopping; a dropped sender means stopping too.
        _ = stop.changed() => {
            // Finishes the request in flight, if any, then closes.
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, "metrics server: connection ended");
    }
}

fn respond<B>(state: &HttpState, req: &Request<B>) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    let debug = (state.debug.as_ref()).filter(|_| path.starts_with("/debug/"));
    if !matches!(path, "/metrics" | "/healthz" | "/readyz") && debug.is_none() {
        return text(StatusCode::NOT_FOUND, "not found\n");
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    if let Some(handler) = debug {
        return match handler(path, req.uri().query().unwrap_or("")) {
            Some((status, body)) => {
                let mut r = Response::new(Full::new(Bytes::from(body)));
                *r.status_mut() = status;
                r.headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
                r
            }
            None => text(StatusCode::NOT_FOUND, "not found\n"),
        };
    }
    match path {
        "/metrics" => scrape(state),
        "/healthz" if state.is_alive() => text(StatusCode::OK, "ok\n"),
        "/healthz" => text(StatusCode::INTERNAL_SERVER_ERROR, "engine stopped\n"),
        _ if !state.is_alive() => text(StatusCode::SERVICE_UNAVAILABLE, "engine stopped\n"),
        _ if !state.is_ready() => {
            text(StatusCode::SERVICE_UNAVAILABLE, "watch caches not synced\n")
        }
        _ => text(StatusCode::OK, "ok\n"),
    }
}

fn scrape(state: &HttpState) -> Response<Full<Bytes>> {
    (state.refresh)();
    if let Some(bytes) = resident_bytes() {
        state.metrics.set_resident_bytes(bytes);
    }
    match state.metrics.encode() {
        Ok(body) => {
            let mut r = Response::new(Full::new(Bytes::from(body)));
            r.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static(metrics::CONTENT_TYPE),
            );
            r
        }
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, &format!("{e}\n")),
    }
}

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::copy_from_slice(body.as_bytes())));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(TEXT));
    r
}

/// The process's resident set size, from `/proc/self/status` (Linux); `None` elsewhere.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::SocketAddr;
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// A plain HTTP/1.1 request; returns the status code, the head and the body.
    async fn get(addr: SocketAddr, method: &str, path: &str) -> (u16, String, String) {
        let request =
            format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
        let raw = tokio::task::spawn_blocking(move || {
            let mut stream = std::net::TcpStream::connect(addr)?;
            stream.write_all(request.as_bytes())?;
            let mut raw = String::new();
            stream.read_to_string(&mut raw)?;
            Ok::<_, io::Error>(raw)
        })
        .await
        .expect("request task")
        .expect("request");
        let (head, body) = raw.split_once("\r\n\r\n").expect("a response head");
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("a status code");
        (status, head.to_string(), body.to_string())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn serves_metrics_health_and_readiness() {
        let metrics = Arc::new(Metrics::new());
        let refreshed = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&refreshed);
        let state = Arc::new(HttpState::new(Arc::clone(&metrics), move || {
            counter.fetch_add(1, Ordering::Relaxed);
        }));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local address");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, Arc::clone(&state), async move {
            let _ = stopped.await;
        }));

        let (status, _, body) = get(addr, "GET", "/healthz").await;
        assert_eq!((status, body.as_str()), (200, "ok\n"));
        let (status, _, body) = get(addr, "GET", "/readyz").await;
        assert_eq!((status, body.as_str()), (503, "watch caches not synced\n"));
        state.set_ready(true);
        let (status, _, body) = get(addr, "GET", "/readyz").await;
        assert_eq!((status, body.as_str()), (200, "ok\n"));

        metrics.set_leader(true);
        let (status, head, body) = get(addr, "GET", "/metrics").await;
        assert_eq!(status, 200);
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: text/plain; version=0.0.4; charset=utf-8"),
            "{head}"
        );
        assert!(
            body.contains("# TYPE sliced_leader gauge\nsliced_leader 1\n"),
            "{body}"
        );
        assert_eq!(refreshed.load(Ordering::Relaxed), 1);
        if cfg!(target_os = "linux") {
            assert!(body.contains("process_resident_memory_bytes "), "{body}");
        }

        let (status, _, _) = get(addr, "GET", "/nope").await;
        assert_eq!(status, 404);
        let (status, head, _) = get(addr, "POST", "/metrics").await;
        assert_eq!(status, 405);
        assert!(
            head.to_ascii_lowercase().contains("allow: get, head"),
            "{head}"
        );

        state.set_engine_alive(false);
        let (status, _, body) = get(addr, "GET", "/healthz").await;
        assert_eq!((status, body.as_str()), (500, "engine stopped\n"));
        let (status, _, _) = get(addr, "GET", "/readyz").await;
        assert_eq!(status, 503);

        let _ = stop.send(());
        let served = tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("shutdown in time")
            .expect("server task");
        assert!(served.is_ok());
        assert!(
            std::net::TcpStream::connect(addr).is_err(),
            "still listening"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shutdown_closes_idle_keep_alive_connections() {
        let state = Arc::new(HttpState::new(Arc::new(Metrics::new()), || {}));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local address");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, state, async move {
            let _ = stopped.await;
        }));
        // A kept-alive connection with one request answered, then left idle.
        let client = tokio::task::spawn_blocking(move || {
            let mut stream = std::net::TcpStream::connect(addr)?;
            stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")?;
            let mut raw = String::new();
            // Reads until the server closes: the answer, then EOF at shutdown.
            stream.read_to_string(&mut raw)?;
            Ok::<_, io::Error>(raw)
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        let _ = stop.send(());
        let raw = tokio::time::timeout(Duration::from_secs(10), client)
            .await
            .expect("closed in time")
            .expect("client task")
            .expect("client");
        assert!(raw.starts_with("HTTP/1.1 200"), "{raw}");
        let served = tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("shutdown in time")
            .expect("server task");
        assert!(served.is_ok());
    }
}
