//! A `redis-server` of a test's own, on a free port of 127.0.0.1, without persistence; killed
//! when dropped. A missing `redis-server` fails the test (`scripts/test.sh` installs it).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running (or killed) redis-server.
pub struct RedisServer {
    /// Its TCP port on 127.0.0.1.
    pub port: u16,
    /// Its stdout and stderr.
    pub log: PathBuf,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a redis-server on a free port and waits until it answers PING.
    pub async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Self::start_on(port).await
    }

    /// Starts a redis-server on `port` and waits (up to 10 s) until it answers PING.
    pub async fn start_on(port: u16) -> Self {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let log = dir.join(format!("redis-{port}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start redis-server ({e}): install it (scripts/test.sh does, with apt-get)")
            });
        let mut server = Self {
            port,
            log,
            child: Some(child),
        };
        server.wait_ready().await;
        server
    }

    async fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut c) = self.try_connection().await {
                let pong: Result<String, _> = redis::cmd("PING").query_async(&mut c).await;
                if pong.is_ok() {
                    return;
                }
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
                panic!(
                    "redis-server on port {} exited ({status}): {}",
                    self.port,
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < deadline,
                "redis-server on port {} did not answer within 10 s (log: {})",
                self.port,
                self.log.display()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `redis://127.0.0.1:{port}/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    async fn try_connection(&self) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
        redis::Client::open(self.url())?
            .get_multiplexed_async_connection()
            .await
    }

    /// A direct connection, for looking at and planting keys.
    pub async fn connection(&self) -> redis::aio::MultiplexedConnection {
        self.try_connection()
            .await
            .unwrap_or_else(|e| panic!("connect to redis-server on port {}: {e}", self.port))
    }

    /// The value of `key`.
    pub async fn get(&self, key: &str) -> Option<String> {
        redis::cmd("GET")
            .arg(key)
            .query_async(&mut self.connection().await)
            .await
            .unwrap()
    }

    /// Sets `key` to `value`.
    pub async fn set(&self, key: &str, value: &str) {
        redis::cmd("SET")
            .arg(key)
            .arg(value)
            .query_async::<()>(&mut self.connection().await)
            .await
            .unwrap();
    }

    /// Milliseconds `key` has left to live (-1: no expiry, -2: no key).
    pub async fn pttl(&self, key: &str) -> i64 {
        redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut self.connection().await)
            .await
            .unwrap()
    }

    /// Polls `key` for up to 5 s until it holds `value`; the last value seen.
    pub async fn wait_for(&self, key: &str, value: &str) -> Option<String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let got = self.get(key).await;
            if got.as_deref() == Some(value) || Instant::now() > deadline {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Kills the server (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
