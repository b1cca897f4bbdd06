// The spend chart: stacked bars per day and workspace kind, from the page's JSON endpoint.
document.addEventListener("DOMContentLoaded", async () => {
  const canvas = document.getElementById("spend-chart");
  if (!canvas || !window.Chart) return;
  const response = await fetch(canvas.dataset.url, { headers: { Accept: "application/json" } });
  if (!response.ok) return;
  const data = await response.json();
  // Each kind's legend and colour come with the data (its backend's label and spend_colour).
  const kinds = data.kinds || {};
  const chart = new Chart(canvas, {
    type: "bar",
    data: {
      labels: data.days,
      datasets: Object.entries(data.series).map(([kind, values]) => ({
        label: (kinds[kind] || {}).label || kind,
        data: values.map(Number),
        backgroundColor: (kinds[kind] || {}).colour,
      })),
    },
    options: {
      animation: false,
      scales: { x: { stacked: true }, y: { stacked: true, title: { display: true, text: data.currency } } },
    },
  });
  canvas.dataset.ready = String(chart.data.datasets.length);
});

// The all-teams chart: per team, spend so far and what the burn adds by month end (stacked,
// horizontal so 12 team names stay legible on a phone), from the page's JSON (json_script).
document.addEventListener("DOMContentLoaded", () => {
  const canvas = document.getElementById("all-teams-chart");
  const source = document.getElementById("all-teams-chart-data");
  // A row of height per team (data-rows), set here: the CSP allows no style="" attribute.
  const box = canvas && canvas.closest(".chart-box-rows");
  if (box) box.style.height = `${Number(box.dataset.rows) || 0}rem`;
  if (!canvas || !source || !window.Chart) return;
  const data = JSON.parse(source.textContent);
  const chart = new Chart(canvas, {
    type: "bar",
    data: {
      labels: data.teams,
      datasets: [
        { label: "Spent so far", data: data.spent.map(Number), backgroundColor: "#2b6cb0" },
        { label: "Forecast to month end", data: data.rest.map(Number), backgroundColor: "#90cdf4" },
      ],
    },
    options: {
      indexAxis: "y",
      animation: false,
      maintainAspectRatio: false,
      scales: { x: { stacked: true, title: { display: true, text: data.currency } }, y: { stacked: true } },
    },
  });
  canvas.dataset.ready = String(chart.data.labels.length);
});
