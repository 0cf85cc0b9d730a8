"""The virtual crawler and the ordering evaluation (Cho, Garcia-Molina & Page 1998 §4-6;
Najork & Wiener 2001 §4), behind `scrapy evaluate GRAPH --orders ...`.

graph.py    read an edge-list graph file (with URLs when the file has them)
crawler.py  Cho's Fig. 1 virtual crawler and its orders (bfs, random, backlinks,
            pagerank, opic, hostfirst)
metrics.py  IB, IR, hot pages, PST, PCS, average PageRank per tenth
run.py      one evaluation: importance, one crawl per order, CSV and PNG
"""
