// pab applyfixture: stands in for the Greenhouse job board's React bundle, which the saved
// page does not include. Like the real board, the form is method="get" with unnamed inputs,
// and "Submit application" sends the data by script: here a JSON POST to
// /axon/jobs/6641960003/applications, then the browser goes to the confirmation page.
(function () {
  var form = document.getElementById("application-form");
  if (!form) return;
  form.noValidate = true; // the bundle validates in script; the hidden react-select inputs stay empty
  var status = document.createElement("p");
  status.id = "fixture-submit-status";
  status.setAttribute("role", "alert");
  form.appendChild(status);
  var val = function (id) { var el = document.getElementById(id); return el ? el.value : ""; };
  var file = function (id) {
    var el = document.getElementById(id);
    return el && el.files && el.files[0] ? { name: el.files[0].name, size: el.files[0].size } : null;
  };
  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var body = {
      job_id: "6641960003",
      first_name: val("first_name"), last_name: val("last_name"), email: val("email"), phone: val("phone"),
      resume: file("resume"), cover_letter: file("cover_letter"), answers: {}
    };
    form.querySelectorAll('input[id^="question_"]').forEach(function (el) {
      body.answers[el.id] = el.type === "checkbox" ? el.checked : el.value;
    });
    fetch("/axon/jobs/6641960003/applications", {
      method: "POST",
      headers: { "Content-Type": "application/json", "Accept": "application/json" },
      body: JSON.stringify(body)
    }).then(function (r) {
      return r.json().then(function (j) { return { ok: r.ok, j: j }; });
    }).then(function (x) {
      if (x.ok) { location.assign(x.j.confirmation_url); return; }
      status.textContent = "There were errors with your application: " + (x.j.errors || []).join("; ");
    }).catch(function (e) {
      status.textContent = "The application could not be sent: " + e;
    });
  });
})();
