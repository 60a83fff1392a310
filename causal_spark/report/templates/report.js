// the traces table: click a header to sort, type to filter (no library, no network)
(function () {
  var table = document.getElementById("traces");
  if (!table) { return; }
  var body = table.tBodies[0];
  var filter = document.getElementById("trace-filter");
  var shown = document.getElementById("traces-shown");
  function count() {
    var n = 0;
    Array.prototype.forEach.call(body.rows, function (r) { if (r.style.display !== "none") { n++; } });
    shown.textContent = String(n);
  }
  filter.addEventListener("input", function () {
    var needle = filter.value.toLowerCase();
    Array.prototype.forEach.call(body.rows, function (r) {
      r.style.display = r.textContent.toLowerCase().indexOf(needle) >= 0 ? "" : "none";
    });
    count();
  });
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
    th.classList.add("sortable");
    th.addEventListener("click", function () {
      var numeric = th.classList.contains("n");
      var down = th.getAttribute("data-order") !== "asc";
      th.setAttribute("data-order", down ? "asc" : "desc");
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[col].textContent, y = b.cells[col].textContent;
        var c = numeric ? Number(x) - Number(y) : x.localeCompare(y);
        return down ? c : -c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
  count();
})();
