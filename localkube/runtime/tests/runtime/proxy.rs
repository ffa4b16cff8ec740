//! The userspace Service proxy on loopback addresses.

use std::net::SocketAddr;
use std::time::Duration;

use localkube_runtime::proxy::{ServicePortKey, ServiceProxy};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// A backend that greets with its name, then echoes lines prefixed with its name.
async fn backend(name: &'static str, ip: &str) -> SocketAddr {
    let listener = TcpListener::bind((ip, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let (read, mut write) = socket.into_split();
                let _ = write.write_all(format!("{name}\n").as_bytes()).await;
                let mut lines = BufReader::new(read).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if write
                        .write_all(format!("{name}:{line}\n").as_bytes())
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    addr
}

struct Client {
    lines: tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    write: tokio::net::tcp::OwnedWriteHalf,
}

impl Client {
    async fn connect(addr: SocketAddr) -> (Self, String) {
        let (read, write) = TcpStream::connect(addr).await.unwrap().into_split();
        let mut client = Self {
            lines: BufReader::new(read).lines(),
            write,
        };
        let greeting = client.line().await;
        (client, greeting)
    }

    async fn line(&mut self) -> String {
        tokio::time::timeout(Duration::from_secs(5), self.lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
    }

    async fn echo(&mut self, text: &str) -> String {
        self.write
            .write_all(format!("{text}\n").as_bytes())
            .await
            .unwrap();
        self.line().await
    }
}

fn key() -> ServicePortKey {
    ServicePortKey {
        namespace: "bloodraven-playground".into(),
        name: "mysql-playground-primary".into(),
        port: 3306,
    }
}

// docs/design/requirements.md R000.20: an established proxied connection survives an endpoint
// change; new connections go to the new endpoint.
#[tokio::test]
async fn established_connection_survives_endpoint_change() {
    let iad = backend("iad", "127.0.0.2").await;
    let pdx = backend("pdx", "127.0.0.3").await;
    let proxy = ServiceProxy::new(None);
    let addr = proxy
        .set_service_port(key(), "127.0.0.1:0".parse().unwrap(), vec![iad])
        .await
        .unwrap();

    let (mut old, greeting) = Client::connect(addr).await;
    assert_eq!(greeting, "iad");
    assert_eq!(old.echo("before").await, "iad:before");

    proxy.set_endpoints(&key(), vec![pdx]).unwrap();
    let (mut new, greeting) = Client::connect(addr).await;
    assert_eq!(
        greeting, "pdx",
        "a new connection goes to the current endpoint"
    );
    assert_eq!(
        old.echo("after").await,
        "iad:after",
        "the established connection is left alone"
    );
    assert_eq!(new.echo("x").await, "pdx:x");

    // Same address again: only the endpoints change, the listener stays.
    let again = proxy
        .set_service_port(key(), addr, vec![iad, pdx])
        .await
        .unwrap();
    assert_eq!(again, addr);
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(Client::connect(addr).await.1);
    }
    seen.sort();
    assert_eq!(
        seen,
        vec!["iad", "iad", "pdx", "pdx"],
        "round robin over ready endpoints"
    );

    // No endpoints: new connections are closed, established ones still work.
    proxy.set_endpoints(&key(), vec![]).unwrap();
    let mut refused = TcpStream::connect(addr).await.unwrap();
    let mut buf = [0u8; 8];
    let n = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::io::AsyncReadExt::read(&mut refused, &mut buf),
    )
    .await
    .unwrap()
    .unwrap_or(0);
    assert_eq!(n, 0, "closed without a backend");
    assert_eq!(old.echo("still").await, "iad:still");
    proxy.remove_service_port(&key());
    assert_eq!(new.echo("after-remove").await, "pdx:after-remove");
}

/// A UDP backend that answers each datagram with its name and the datagram.
async fn udp_backend(name: &'static str, ip: &str) -> SocketAddr {
    let socket = tokio::net::UdpSocket::bind((ip, 0)).await.unwrap();
    let addr = socket.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 512];
        while let Ok((n, peer)) = socket.recv_from(&mut buf).await {
            let reply = format!("{name}:{}", String::from_utf8_lossy(&buf[..n]));
            let _ = socket.send_to(reply.as_bytes(), peer).await;
        }
    });
    addr
}

async fn udp_ask(
    client: &tokio::net::UdpSocket,
    proxy: SocketAddr,
    text: &str,
) -> (String, SocketAddr) {
    client.send_to(text.as_bytes(), proxy).await.unwrap();
    let mut buf = [0u8; 512];
    let (n, from) = tokio::time::timeout(Duration::from_secs(5), client.recv_from(&mut buf))
        .await
        .expect("a reply")
        .unwrap();
    (String::from_utf8_lossy(&buf[..n]).into_owned(), from)
}

// docs/design/history.md#issue-14-item-8: UDP Service ports; a client's session keeps its
// endpoint while it is active, replies come from the Service address, an idle session's client
// starts a new one on the current endpoints.
#[tokio::test]
async fn udp_sessions_keep_their_endpoint_until_idle() {
    let iad = udp_backend("iad", "127.0.0.2").await;
    let pdx = udp_backend("pdx", "127.0.0.3").await;
    let proxy = ServiceProxy::new(None);
    let addr = proxy
        .set_udp_service_port(key(), "127.0.0.1:0".parse().unwrap(), vec![iad])
        .await
        .unwrap();
    let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    assert_eq!(
        udp_ask(&client, addr, "one").await,
        ("iad:one".into(), addr)
    );
    proxy
        .set_udp_service_port(key(), addr, vec![pdx])
        .await
        .unwrap();
    assert_eq!(
        udp_ask(&client, addr, "two").await.0,
        "iad:two",
        "the active session keeps its endpoint"
    );
    let other = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    assert_eq!(
        udp_ask(&other, addr, "x").await.0,
        "pdx:x",
        "a new client uses the current endpoints"
    );
    tokio::time::sleep(localkube_runtime::proxy::UDP_SESSION_IDLE * 3).await;
    assert_eq!(
        udp_ask(&client, addr, "three").await.0,
        "pdx:three",
        "after the idle timeout a new session"
    );
    proxy.remove_udp_service_port(&key());
    assert_eq!(proxy.udp_listen_addr(&key()), None);
}
