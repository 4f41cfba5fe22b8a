// Swaps in a fresh rendering of the page's sections every 2 s, without a reload.
(() => {
  const live = document.getElementById("live");
  const conn = document.getElementById("conn");
  const every = 2000;
  async function refresh() {
    try {
      const answer = await fetch("/status/live", { cache: "no-store", credentials: "same-origin" });
      if (answer.status === 401) {
        conn.textContent = "signed out: reload the page to sign in again";
        conn.className = "conn bad";
        return;
      }
      if (!answer.ok) throw new Error("HTTP " + answer.status);
      live.innerHTML = await answer.text();
      conn.textContent = "live, refreshed every 2 s";
      conn.className = "conn";
    } catch (e) {
      conn.textContent = "cannot refresh (" + e.message + "); retrying";
      conn.className = "conn bad";
    }
    setTimeout(refresh, every);
  }
  setTimeout(refresh, every);
})();
