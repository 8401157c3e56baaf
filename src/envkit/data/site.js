// envkit site: filter the matrix rows by architecture, model type and family.
// Works from file://; ?q=...&family=... in the address fill the form (links can share a view).
"use strict";
(function () {
  const form = document.getElementById("filter");
  if (!form) return;
  const query = document.getElementById("q");
  const family = document.getElementById("family");
  const count = document.getElementById("count");
  const rows = Array.from(document.querySelectorAll("#matrix tbody tr"));
  const params = new URLSearchParams(window.location.search);
  query.value = params.get("q") || "";
  family.value = params.get("family") || "";

  function apply() {
    const words = query.value.toLowerCase().split(/\s+/).filter(Boolean);
    const fam = family.value;
    let shown = 0;
    for (const row of rows) {
      const text = row.dataset.s || "";
      const match = (!fam || row.dataset.f === fam) && words.every((w) => text.includes(w));
      row.hidden = !match;
      if (match) shown += 1;
    }
    count.textContent = shown + " of " + rows.length + " architectures";
  }

  // the newest releases first: the table opens scrolled to its right end
  const scroller = document.querySelector(".scroll");
  if (scroller) scroller.scrollLeft = scroller.scrollWidth;

  query.addEventListener("input", apply);
  family.addEventListener("change", apply);
  form.addEventListener("submit", (event) => event.preventDefault());
  apply();
})();
