// The spend chart: stacked bars per day and workspace kind, from the page's JSON endpoint.
document.addEventListener("DOMContentLoaded", async () => {
  const canvas = document.getElementById("spend-chart");
  if (!canvas || !window.Chart) return;
  const response = await fetch(canvas.dataset.url, { headers: { Accept: "application/json" } });
  if (!response.ok) return;
  const data = await response.json();
  const colours = { vm: "#2b6cb0", mig: "#38a169", namespace: "#d69e2e" };
  const labels = { vm: "VM", mig: "MIG slice", namespace: "AKS namespace" };
  const chart = new Chart(canvas, {
    type: "bar",
    data: {
      labels: data.days,
      datasets: Object.entries(data.series).map(([kind, values]) => ({
        label: labels[kind] || kind,
        data: values.map(Number),
        backgroundColor: colours[kind],
      })),
    },
    options: {
      animation: false,
      scales: { x: { stacked: true }, y: { stacked: true, title: { display: true, text: data.currency } } },
    },
  });
  canvas.dataset.ready = String(chart.data.datasets.length);
});
