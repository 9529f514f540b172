(function () {
  "use strict";
  var slice = document.getElementById("f-slice");
  var change = document.getElementById("f-change");
  var count = document.getElementById("f-count");
  var rows = document.querySelectorAll("#cases > tbody > tr");
  function apply() {
    var s = slice.value, c = change.value, shown = 0;
    for (var i = 0; i < rows.length; i++) {
      var r = rows[i];
      var inSlice = s === "" || (" " + r.getAttribute("data-slices") + " ").indexOf(" " + s + " ") >= 0;
      var ok = inSlice && (c === "" || r.getAttribute("data-change") === c);
      r.hidden = !ok;
      if (ok) { shown++; }
    }
    count.textContent = shown + " of " + rows.length + " cases";
  }
  slice.addEventListener("change", apply);
  change.addEventListener("change", apply);
  apply();
})();
