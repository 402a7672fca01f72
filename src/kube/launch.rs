//! What `sliced run` does around `run`: a tokio runtime, a client from a kubeconfig or the
//! in-cluster service account, and shutdown on SIGTERM or Ctrl-C.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::run::{RunError, RunOptions, RunState, RunSummary, run};

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("starting the async runtime")]
    Runtime(#[source] std::io::Error),
    #[error("reading kubeconfig {}", path.display())]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("no cluster configuration (pass --kubeconfig, or run in a pod)")]
    Infer(#[source] kube::config::InferConfigError),
    #[error("in-cluster configuration")]
    InCluster(#[source] kube::config::InClusterError),
    #[error("creating the client")]
    Client(#[source] kube::Error),
    #[error(transparent)]
    Run(#[from] RunError),
}

/// The client configuration: the given kubeconfig; without one, the pod's service account when
/// running in a cluster, else `$KUBECONFIG` or `~/.kube/config`.
async fn config(kubeconfig: Option<PathBuf>) -> Result<Config, LaunchError> {
    match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(&path).map_err(|source| LaunchError::Kubeconfig {
                path: path.clone(),
                source,
            })?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(|source| LaunchError::Kubeconfig { path, source })
        }
        None if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() => {
            Config::incluster().map_err(LaunchError::InCluster)
        }
        None => Config::infer().await.map_err(LaunchError::Infer),
    }
}

/// Resolves on SIGTERM or Ctrl-C.
async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!("shutting down: finishing the writes in flight, releasing the lease if held");
}

/// Runs against the cluster until SIGTERM or Ctrl-C.
pub fn run_until_terminated(
    kubeconfig: Option<PathBuf>,
    options: RunOptions,
    metrics: Option<std::net::TcpListener>,
) -> Result<RunSummary, LaunchError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("sliced-io")
        .on_thread_park(crate::allocator::collect_idle_thread)
        .enable_all()
        .build()
        .map_err(LaunchError::Runtime)?;
    runtime.block_on(async move {
        let config = config(kubeconfig).await?;
        let client = Client::try_from(config).map_err(LaunchError::Client)?;
        let state = RunState::new(&options);
        Ok(run(client, options, state, metrics, terminated()).await?)
    })
}
