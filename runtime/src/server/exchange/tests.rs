use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

#[tokio::test(start_paused = true)]
async fn a_write_that_waits_is_cut_off_at_the_deadline() {
    let (ours, mut theirs) = tokio::io::duplex(64);
    let clock = ExchangeClock::default();
    let mut io = TimedIo::new(ours, clock.clone());
    io.write_all(&[0; 64]).await.expect("the buffer takes it");
    let started = Instant::now();
    // No deadline: a write that waits, waits.
    assert!(
        tokio::time::timeout(Duration::from_secs(100), io.write_all(&[0; 1]))
            .await
            .is_err()
    );
    clock.start(Duration::from_secs(5));
    let error = io.write_all(&[0; 1]).await.expect_err("cut off");
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    assert_eq!(started.elapsed(), Duration::from_secs(105));
    // What completes at once is never refused, past the deadline too.
    let mut drained = [0; 64];
    theirs.read_exact(&mut drained).await.expect("read");
    io.write_all(&[1; 8]).await.expect("room again");
}

#[tokio::test(start_paused = true)]
async fn a_read_is_never_cut_off() {
    let (ours, mut theirs) = tokio::io::duplex(64);
    let clock = ExchangeClock::default();
    let mut io = TimedIo::new(ours, clock.clone());
    clock.start(Duration::from_secs(5));
    let reader = tokio::spawn(async move {
        let mut one = [0; 1];
        io.read_exact(&mut one).await.map(|_| one[0])
    });
    tokio::time::sleep(Duration::from_secs(60)).await;
    theirs.write_all(b"a").await.expect("write");
    assert_eq!(reader.await.expect("joined").expect("read"), b'a');
}
