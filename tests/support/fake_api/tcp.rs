//! The fake on a real socket, for a client in another process (the `sliced` binary): HTTP/1.1
//! without TLS on 127.0.0.1, every request answered as [`FakeService`] answers it in process.

use std::convert::Infallible;
use std::net::SocketAddr;

use http::Request;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

use super::FakeApiServer;
use super::handlers::ResBody;
use super::status::ApiError;

impl FakeApiServer {
    /// Serves this fake on an ephemeral port of 127.0.0.1 until the runtime ends. Needs a tokio
    /// runtime.
    pub async fn serve_tcp(&self) -> std::io::Result<SocketAddr> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let server = self.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let server = server.clone();
                let service = service_fn(move |req| answer(server.clone(), req));
                tokio::spawn(async move {
                    // A client that goes away mid-request is not the fake's error.
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(address)
    }
}

async fn answer(
    server: FakeApiServer,
    req: Request<Incoming>,
) -> Result<http::Response<ResBody>, Infallible> {
    if server.hangs(req.uri().path()) {
        std::future::pending::<()>().await;
    }
    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return Ok(super::handlers::error(&ApiError::bad_request(
                e.to_string(),
            )));
        }
    };
    Ok(server.handle(&parts, &body))
}
