//! "MySQL down" is not proof (docs/design/history.md#issue-10-case-1): only a refused
//! connection (nothing listens on the port) reads as `refused`; a mysqld that accepts and never
//! answers (frozen) times out, which proves nothing. No mysqld needed: a closed port and a silent
//! listener on loopback.

use std::time::Duration;

use bloodraven_mysql::{
    live::{ConnectOptions, LiveMysql},
    Flavor,
};

fn client(port: u16) -> LiveMysql {
    LiveMysql::new(
        Flavor::MariaDb,
        ConnectOptions {
            host: "127.0.0.1".to_owned(),
            port,
            user: "root".to_owned(),
            password: "unused".to_owned(),
            connect_timeout: Duration::from_millis(300),
            statement_timeout: Duration::from_millis(300),
        },
    )
}

#[tokio::test]
async fn a_closed_port_is_refused() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    drop(listener);
    let error = client(port).observe().await.expect_err("nothing listens");
    assert!(error.refused(), "{error}");
}

#[tokio::test]
async fn a_silent_server_is_not_refused() {
    // Accepts (as the kernel does for a SIGSTOPped mysqld) and never sends the greeting.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let error = client(port).observe().await.expect_err("no greeting");
    assert!(!error.refused(), "a timeout is not proof of down: {error}");
    hold.abort();
}
