//! `corral metrics serve` and `corral metrics dump`: the tenants' Prometheus
//! metrics over HTTP (`GET /metrics`) or once on stdout. What is measured
//! lives in [`crate::metrics`]; this is the command line and the endpoint.

use crate::ctx::Ctx;
use crate::metrics::{Exporter, Format};
use crate::out::out;
use clap::{Args, Subcommand};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

/// The default listen address: loopback, port 9717 (in the range
/// Prometheus exporters use; docs/metrics.md).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9717";

pub const METRICS_AFTER_HELP: &str = "Examples:
  corral metrics serve                              http://127.0.0.1:9717/metrics
  corral metrics serve --listen '[::1]:9717'
  corral metrics serve --listen 10.0.0.5:9717 --allow-remote   (firewall it: no TLS, no auth)
  corral metrics dump | promtool check metrics
  corral metrics dump > corral.prom.tmp && mv corral.prom.tmp corral.prom   (textfile collector)
Every series is labelled tenant=\"NAME\"; counters end in _total, units are seconds and bytes.
Prometheus scrape config, every metric and a Grafana dashboard (config/grafana-corral.json):
docs/metrics.md.";

#[derive(Subcommand, Debug)]
pub enum MetricsCmd {
    /// Serve GET /metrics over HTTP for Prometheus to scrape, until SIGTERM or Ctrl-C.
    #[command(after_help = METRICS_AFTER_HELP)]
    Serve(ServeArgs),
    /// Print one exposition (Prometheus text format) to stdout, e.g. for `promtool check
    /// metrics` or node_exporter's textfile collector.
    Dump(DumpArgs),
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address and port to listen on. Loopback by default: the metrics name every tenant (its
    /// user name) and its usage, and the endpoint has no TLS and no authentication.
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "ADDR:PORT")]
    pub listen: String,
    /// Allow an address other than loopback (127.0.0.0/8, ::1). Only behind a firewall that
    /// lets just the Prometheus servers in, or a TLS reverse proxy.
    #[arg(long)]
    pub allow_remote: bool,
}

#[derive(Args, Debug)]
pub struct DumpArgs {
    /// OpenMetrics 1.0 instead of the Prometheus text format 0.0.4.
    #[arg(long)]
    pub openmetrics: bool,
}

pub fn metrics(ctx: &Ctx, cmd: MetricsCmd) -> anyhow::Result<i32> {
    match cmd {
        MetricsCmd::Dump(a) => dump(ctx, a),
        MetricsCmd::Serve(a) => serve(ctx, a),
    }
}

fn dump(ctx: &Ctx, a: DumpArgs) -> anyhow::Result<i32> {
    let exporter = Exporter::new(ctx.layout.clone());
    let format = if a.openmetrics {
        Format::OpenMetrics
    } else {
        Format::Text
    };
    let (text, errors) = exporter.render(format)?;
    for e in &errors {
        eprintln!("corral: metrics: {e}");
    }
    out!("{text}");
    // The exposition is complete (the tenant's other series, and the error
    // count): partial failures are reported, but not as a failed dump.
    Ok(0)
}

/// The address to listen on, checked against `allow_remote`.
pub fn listen_addr(listen: &str, allow_remote: bool) -> anyhow::Result<SocketAddr> {
    let addrs: Vec<SocketAddr> = listen
        .to_socket_addrs()
        .map_err(|e| {
            anyhow::anyhow!("--listen {listen}: {e} (expected ADDR:PORT, e.g. {DEFAULT_LISTEN})")
        })?
        .collect();
    let addr = *addrs
        .first()
        .ok_or_else(|| anyhow::anyhow!("--listen {listen}: no address"))?;
    if !allow_remote && !addr.ip().is_loopback() {
        anyhow::bail!(
            "--listen {listen}: {} is not a loopback address; the metrics name every tenant \
             and its usage, without TLS or authentication: add --allow-remote to serve them \
             there anyway (firewall the port to your Prometheus servers), or keep loopback \
             and put a TLS reverse proxy in front (docs/metrics.md)",
            addr.ip()
        );
    }
    Ok(addr)
}

fn serve(ctx: &Ctx, a: ServeArgs) -> anyhow::Result<i32> {
    let addr = listen_addr(&a.listen, a.allow_remote)?;
    let exporter = Arc::new(Exporter::new(ctx.layout.clone()));
    // Read once before listening: a state directory that cannot be read
    // fails here, not at the first scrape.
    exporter.collect()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    rt.block_on(run_server(addr, exporter))?;
    Ok(0)
}

async fn run_server(addr: SocketAddr, exporter: Arc<Exporter>) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("listening on {addr}: {e}"))?;
    let local = listener.local_addr()?;
    eprintln!("corral: metrics: serving http://{local}/metrics");
    // One reading at a time: two Prometheus servers scraping at once wait
    // for each other instead of doubling the load.
    let lock = Arc::new(tokio::sync::Mutex::new(()));
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    loop {
        let (stream, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // EMFILE and the like: wait a little instead of spinning.
                    eprintln!("corral: metrics: accept: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = term.recv() => break,
            _ = int.recv() => break,
        };
        let (exporter, lock) = (exporter.clone(), lock.clone());
        tokio::spawn(async move {
            let svc =
                hyper::service::service_fn(move |req| handle(req, exporter.clone(), lock.clone()));
            // Errors of one connection (a client that went away) are its own.
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(std::time::Duration::from_secs(10))
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                .await;
        });
    }
    eprintln!("corral: metrics: stopped");
    Ok(())
}

fn reply(status: StatusCode, content_type: &str, body: String) -> Response<String> {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    if let Ok(v) = content_type.parse() {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

const INDEX: &str = "corral metrics exporter: the metrics are at /metrics (docs/metrics.md)\n";

async fn handle(
    req: Request<Incoming>,
    exporter: Arc<Exporter>,
    lock: Arc<tokio::sync::Mutex<()>>,
) -> Result<Response<String>, std::convert::Infallible> {
    const TEXT: &str = "text/plain; charset=utf-8";
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = reply(StatusCode::METHOD_NOT_ALLOWED, TEXT, "GET only\n".into());
        r.headers_mut().insert(
            hyper::header::ALLOW,
            hyper::header::HeaderValue::from_static("GET, HEAD"),
        );
        return Ok(r);
    }
    match req.uri().path() {
        "/metrics" => {}
        "/" => return Ok(reply(StatusCode::OK, TEXT, INDEX.into())),
        _ => return Ok(reply(StatusCode::NOT_FOUND, TEXT, INDEX.into())),
    }
    let accept = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    let format = Format::from_accept(accept);
    let _one = lock.lock().await;
    let rendered = tokio::task::spawn_blocking(move || exporter.render(format)).await;
    Ok(match rendered {
        Ok(Ok((text, errors))) => {
            if let Some(first) = errors.first() {
                match errors.len() {
                    1 => eprintln!("corral: metrics: {first}"),
                    n => eprintln!("corral: metrics: {first} (and {} more)", n - 1),
                }
            }
            reply(StatusCode::OK, format.content_type(), text)
        }
        Ok(Err(e)) => {
            eprintln!("corral: metrics: {e}");
            reply(StatusCode::INTERNAL_SERVER_ERROR, TEXT, format!("{e}\n"))
        }
        Err(e) => {
            eprintln!("corral: metrics: {e}");
            reply(
                StatusCode::INTERNAL_SERVER_ERROR,
                TEXT,
                "internal error\n".into(),
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_the_default_and_other_addresses_need_allow_remote() {
        assert_eq!(
            listen_addr(DEFAULT_LISTEN, false).unwrap(),
            "127.0.0.1:9717".parse().unwrap()
        );
        assert!(listen_addr("[::1]:9717", false).is_ok());
        assert!(listen_addr("127.0.0.2:1", false).is_ok());
        let e = listen_addr("0.0.0.0:9717", false).unwrap_err().to_string();
        assert!(e.contains("--allow-remote"), "{e}");
        assert!(listen_addr("192.0.2.1:9717", false).is_err());
        assert!(listen_addr("0.0.0.0:9717", true).is_ok());
        assert!(listen_addr("127.0.0.1", false).is_err(), "no port");
    }
}
